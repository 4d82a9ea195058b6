/* job.c — the number parser every user value goes through, workload
 * argument lookup, option names, and handing the resolved job to daemons
 * (the JobSpec codec itself: job_spec.c). */
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

/* The job file a daemon inherits: a frame, so a stray descriptor number is
 * caught instead of believed, then the JobSpec the launcher packed for
 * daemons, zeros up to the next JOB_ALIGN bytes, and the placed topology
 * if the launcher shared one (its tables are read in place: aligned). */
struct job_frame {
	uint64_t magic;
	uint64_t len;      /* of the JobSpec bytes */
	uint64_t checksum; /* rt_hash of the JobSpec bytes */
};

#define JOB_MAGIC 0x6b626a6f62763032ULL /* "kbjobv02" */
#define JOB_ALIGN 64

static uint64_t topology_offset(uint64_t spec_len)
{
	uint64_t end = sizeof(struct job_frame) + spec_len;

	return (end + JOB_ALIGN - 1) / JOB_ALIGN * JOB_ALIGN;
}

static enum rt_err write_job(int fd, const struct rt_buf *spec, const struct rt_topology *topo)
{
	struct job_frame fr = { JOB_MAGIC, spec->len, rt_hash(RT_HASH_INIT, spec->data, spec->len) };
	static const uint8_t zeros[JOB_ALIGN];
	size_t pad = (size_t)(topology_offset(spec->len) - sizeof(fr) - spec->len);

	if (write(fd, &fr, sizeof(fr)) != (ssize_t)sizeof(fr) ||
	    write(fd, spec->data, spec->len) != (ssize_t)spec->len ||
	    write(fd, zeros, pad) != (ssize_t)pad || (topo && rt_topology_write(topo, fd)) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL))
		return rt_fail(RT_EIO, "cannot write the job file for the daemons: %s",
			       strerror(errno));
	return RT_EOK;
}

enum rt_err rt_job_share(const struct rt_job *job, enum rt_job_role role,
			 const struct rt_topology *topo, int *fd_out)
{
	struct rt_buf spec;
	enum rt_err err;
	int fd;

	rt_buf_init(&spec);
	err = rt_job_encode(job, role, &spec);
	fd = err ? -1 : memfd_create("kb-job", MFD_ALLOW_SEALING);
	if (!err && fd < 0)
		err = rt_fail(RT_EIO, "cannot create the job file for the daemons: %s",
			      strerror(errno));
	if (!err)
		err = write_job(fd, &spec, topo);
	if (spec.data)
		explicit_bzero(spec.data, spec.len); /* the client secret */
	rt_buf_release(&spec);
	if (err) {
		if (fd >= 0)
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

enum rt_err rt_job_check(const struct rt_job *job)
{
	const struct rt_keys *k = &job->keys;

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
	    (unsigned)job->ff_mode > RT_FF_AUTO || (unsigned)job->progress > RT_PROGRESS_OFF)
		return rt_fail(RT_EDECODE, "job: transport, colocation, mode, trace format, "
			       "fast-forward mode or progress out of range");
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

/* The frame of the job file `fd`, checked against the file's size. */
static enum rt_err read_frame(int fd, struct job_frame *fr, off_t *size)
{
	struct stat st;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(*fr) ||
	    pread(fd, fr, sizeof(*fr), 0) != (ssize_t)sizeof(*fr) || fr->magic != JOB_MAGIC)
		return rt_fail(RT_EDECODE, "daemon: descriptor %d is not the launcher's job file", fd);
	if (fr->len > (uint64_t)st.st_size - sizeof(*fr))
		return rt_fail(RT_EDECODE, "daemon: the job file is cut short");
	*size = st.st_size;
	return RT_EOK;
}

enum rt_err rt_job_adopt(int fd, struct rt_job *job)
{
	struct job_frame fr;
	uint8_t *spec;
	enum rt_err err;
	off_t size;

	err = read_frame(fd, &fr, &size);
	if (err)
		return err;
	spec = malloc(fr.len ? fr.len : 1);
	if (!spec)
		return rt_fail(RT_ENOMEM, "daemon: cannot allocate the job (%llu bytes)",
			       (unsigned long long)fr.len);
	if (pread(fd, spec, fr.len, (off_t)sizeof(fr)) != (ssize_t)fr.len ||
	    fr.checksum != rt_hash(RT_HASH_INIT, spec, fr.len))
		err = rt_fail(RT_EDECODE, "daemon: the job file is corrupt");
	if (!err)
		err = rt_job_decode(spec, fr.len, job);
	explicit_bzero(spec, fr.len);
	free(spec);
	return err;
}

enum rt_err rt_job_topology(int fd, struct rt_topology *topo)
{
	struct job_frame fr;
	off_t size;

	/* a job file without a topology after the job: the launcher did not
	 * share one */
	if (read_frame(fd, &fr, &size) || (uint64_t)size <= topology_offset(fr.len))
		return RT_ENOTFOUND;
	return rt_topology_map(fd, topology_offset(fr.len), topo);
}
