/* fuzz_job.c — libFuzzer harness: the job an agent gets in Assign (the
 * bytes of the coordinator's sealed job file, rt_job_adopt). Any input is
 * adopted only whole and checksummed, else RT_EDECODE; never a crash. */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rt/job.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct rt_job job;
	int fd = memfd_create("fuzz-job", MFD_CLOEXEC);
	enum rt_err err;

	if (fd < 0)
		return 0;
	if (write(fd, data, size) == (ssize_t)size) {
		err = rt_job_adopt(fd, &job);
		if (err != RT_EOK && err != RT_EDECODE)
			abort();
		if (err == RT_EOK && size < sizeof(job))
			abort();
	}
	close(fd);
	return 0;
}
