/* fuzz_job.c — libFuzzer harness: the job an agent gets in Assign (the
 * bytes of the coordinator's sealed job file, rt_job_adopt). Any input is
 * adopted only whole, checksummed and checked (rt_job_check), else
 * RT_EDECODE; never a crash. An input whose first byte is odd gets a valid
 * frame (magic, size and the checksum of its job bytes) written over its
 * first bytes, so the fuzzer reaches past the checksum into the job's
 * contents: a checksum no random input matches would stop it there. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rt/buf.h"
#include "rt/job.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* job.c's frame: magic, size, checksum */
#define FRAME_BYTES (3 * sizeof(uint64_t))
#define JOB_MAGIC 0x6b626a6f62763031ULL

/* A copy of `data` as long as a job file, framed validly. */
static uint8_t *framed(const uint8_t *data, size_t size, size_t *out_size)
{
	size_t need = FRAME_BYTES + sizeof(struct rt_job);
	uint8_t *b = calloc(1, need > size ? need : size);
	uint64_t frame[3] = { JOB_MAGIC, sizeof(struct rt_job), 0 };

	if (!b)
		return NULL;
	memcpy(b, data, size);
	frame[2] = rt_hash(RT_HASH_INIT, b + FRAME_BYTES, sizeof(struct rt_job));
	memcpy(b, frame, sizeof(frame));
	*out_size = need > size ? need : size;
	return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct rt_job job;
	uint8_t *fixed = NULL;
	int fd = memfd_create("fuzz-job", MFD_CLOEXEC);
	enum rt_err err;

	if (fd < 0)
		return 0;
	if (size && (data[0] & 1) && (fixed = framed(data, size, &size)))
		data = fixed;
	if (write(fd, data, size) == (ssize_t)size) {
		err = rt_job_adopt(fd, &job);
		if (err != RT_EOK && err != RT_EDECODE)
			abort();
		if (err == RT_EOK && (size < sizeof(job) || !memchr(job.workload, 0, sizeof(job.workload))))
			abort();
	}
	free(fixed);
	close(fd);
	return 0;
}
