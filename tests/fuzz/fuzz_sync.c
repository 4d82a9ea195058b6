/* fuzz_sync.c — libFuzzer harness: lockstep Sync frames. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A path an agent's file may have: in the output folder or its .parts. */
static void check_path(const char *p)
{
	const char *name = strncmp(p, ".parts/", 7) ? p : p + 7;

	if (!*name || name[0] == '.' || strchr(name, '/'))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Kb__Sync *msg = NULL;

	if (rt_wire_decode_sync(data, size, &msg) == RT_EOK) {
		if (!msg)
			abort();
		/* an agent's file lands in the output folder or its .parts only */
		if (msg->body_case == KB__SYNC__BODY_FILE_PART)
			check_path(msg->file_part->path);
		/* ... and so does every file an agent's BYE lists */
		for (size_t k = 0; msg->body_case == KB__SYNC__BODY_BYE && k < msg->bye->n_files; k++)
			check_path(msg->bye->files[k]->path);
		rt_wire_free_sync(msg);
	}
	return 0;
}
