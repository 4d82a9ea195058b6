/* fuzz_job.c — libFuzzer harness: the job as an agent gets it in Assign (a
 * packed JobSpec, rt_job_decode) and as a daemon gets it (the launcher's
 * sealed job file, rt_job_adopt: a frame, the JobSpec, the topology). Any
 * input is adopted only whole and checked, else RT_EDECODE or RT_ESCHEMA;
 * never a crash. An input whose first byte is odd is the JobSpec itself:
 * it is decoded directly, and framed validly (magic, length and the
 * checksum of its bytes) for the file path, so the fuzzer reaches past the
 * checksum into the job's contents. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rt/buf.h"
#include "rt/job.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* job.c's frame: magic "kbjobv02", JobSpec length, checksum */
#define JOB_MAGIC 0x6b626a6f62763032ULL

static void check(enum rt_err err, const struct rt_job *job)
{
	if (err != RT_EOK && err != RT_EDECODE && err != RT_ESCHEMA && err != RT_ENOMEM)
		abort();
	if (err == RT_EOK && (!memchr(job->workload, 0, sizeof(job->workload)) ||
			      job->n_args > RT_MAX_ARGS))
		abort();
}

/* `spec` behind a valid frame, into a memory file. */
static int framed_file(const uint8_t *spec, size_t len)
{
	uint64_t frame[3] = { JOB_MAGIC, len, rt_hash(RT_HASH_INIT, spec, len) };
	int fd = memfd_create("fuzz-job", MFD_CLOEXEC);

	if (fd >= 0 && (write(fd, frame, sizeof(frame)) != (ssize_t)sizeof(frame) ||
			write(fd, spec, len) != (ssize_t)len)) {
		close(fd);
		return -1;
	}
	return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct rt_job job;
	int fd;

	if (size && (data[0] & 1)) {
		check(rt_job_decode(data + 1, size - 1, &job), &job);
		fd = framed_file(data + 1, size - 1);
	} else {
		fd = memfd_create("fuzz-job", MFD_CLOEXEC);
		if (fd >= 0 && write(fd, data, size) != (ssize_t)size) {
			close(fd);
			fd = -1;
		}
	}
	if (fd < 0)
		return 0;
	check(rt_job_adopt(fd, &job), &job);
	close(fd);
	return 0;
}
