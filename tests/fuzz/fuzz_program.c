/* fuzz_program.c — libFuzzer harness: a program YAML file
 * (kb_program_load_text: libyaml, then the checks that make its canonical
 * text) and the canonical text itself as every host decodes it from the
 * job (tl_program_parse). Any input must give RT_EOK or RT_EINVAL, never a
 * crash or a leak; an accepted file's text parses back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tl_host.h"
#include "workloads.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char out[65536];
	struct tl_program_text p;
	char *text = malloc(size + 1);
	enum rt_err err;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	err = kb_program_load_text("fuzz", text, size, out, sizeof(out));
	if (err != RT_EOK && err != RT_EUSAGE)
		abort();
	if (err == RT_EOK) {
		if (tl_program_parse(out, &p) != RT_EOK)
			abort();
		tl_program_text_release(&p);
	}
	err = tl_program_parse(text, &p);
	if (err != RT_EOK && err != RT_EINVAL)
		abort();
	if (err == RT_EOK)
		tl_program_text_release(&p);
	free(text);
	return 0;
}
