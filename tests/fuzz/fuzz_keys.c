/* fuzz_keys.c — libFuzzer harness: key-file text (`--keys FILE`). Any
 * input must give RT_EOK with four valid keys or RT_ECONFIG, never a
 * crash, an over-read or a half-filled key set. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt/keys.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rt_keys k;
	enum rt_err err = rt_keys_parse((const char *)data, size, "fuzz", &k);

	if (err != RT_EOK && err != RT_ECONFIG)
		abort();
	if (err == RT_EOK && (!k.on || strlen(k.server_public) != 40 ||
			      strlen(k.server_secret) != 40 || strlen(k.client_public) != 40 ||
			      strlen(k.client_secret) != 40))
		abort();
	if (err != RT_EOK && k.on)
		abort();
	return 0;
}
