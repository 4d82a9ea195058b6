/* fuzz_hosts.c — libFuzzer harness: a hosts file (`run --hosts FILE`).
 * Any input gives RT_OK with a complete placement (every rank 0..n-1 on a
 * host that exists, a tcp:// coordinator) or RT_ECONFIG, never a crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hosts.c" /* the launcher's parser, built into the harness */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kb_hosts h;
	enum rt_err err;
	char label[RT_PATH_MAX];

	memset(&h, 0xa5, sizeof(h));
	h.agent_timeout_s = 0;
	err = kb_hosts_parse((const char *)data, size, "fuzz", &h);
	if (err != RT_EOK && err != RT_ECONFIG)
		abort();
	if (err != RT_EOK)
		return 0;
	if (!h.n_hosts || !h.n_ranks || h.n_ranks > KB_HOSTS_MAX_RANKS ||
	    h.n_hosts > KB_HOSTS_MAX_RANKS || strncmp(h.coordinator, "tcp://", 6) ||
	    !memchr(h.coordinator, '\0', sizeof(h.coordinator)) || h.agent_timeout_s != 60)
		abort();
	for (uint32_t r = 0; r < h.n_ranks; r++)
		if (h.host_of_rank[r] >= h.n_hosts)
			abort();
	for (uint32_t host = 0; host < h.n_hosts; host++)
		if (strncmp(kb_hosts_label(&h, host, label, sizeof(label)), "host ", 5))
			abort();
	return 0;
}
