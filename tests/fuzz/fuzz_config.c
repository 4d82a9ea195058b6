/* fuzz_config.c — libFuzzer harness: YAML config text over the defaults.
 * Any input must give RT_EOK or RT_ECONFIG, never a crash or a leak. */
#include <stdint.h>
#include <stdlib.h>

#include "rt/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rt_config cfg;
	enum rt_err err;

	rt_config_defaults(&cfg);
	err = rt_config_load_text(&cfg, (const char *)data, size, "fuzz");
	if (err != RT_EOK && err != RT_ECONFIG)
		abort();
	if (err == RT_EOK)
		(void)rt_config_validate(&cfg);
	return 0;
}
