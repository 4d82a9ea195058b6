/* hosts.h — the hosts file of a run across hosts (`kernbench run --hosts`).
 *
 *     coordinator: tcp://10.77.0.1:5555   # where agents connect
 *     hosts:
 *       - ranks: [0, 1]                   # host 0
 *       - ranks: [2, 3]                   # host 1
 *
 * Every rank of the run is on exactly one host; all components of a rank
 * stay on its host (they share its memory). */
#ifndef KB_HOSTS_H
#define KB_HOSTS_H

#include <stddef.h>
#include <stdint.h>

#include "kernbench.pb-c.h"
#include "rt/err.h"
#include "rt/job.h"

#define KB_HOSTS_MAX_RANKS 64

struct kb_hosts {
	char coordinator[256];                    /* tcp://ADDR:PORT */
	uint32_t n_hosts;
	uint32_t n_ranks;                         /* ranks listed */
	uint32_t host_of_rank[KB_HOSTS_MAX_RANKS];
	uint64_t agent_timeout_s;                 /* --agent-timeout (default 60) */
};

/* Parses hosts-file text; RT_ECONFIG with one line naming `where`, the
 * line and what was expected. Checks the shape and that no rank is listed
 * twice; kb_hosts_check compares with the run. */
enum rt_err kb_hosts_parse(const char *text, size_t len, const char *where, struct kb_hosts *h);
/* Reads and parses `path`. */
enum rt_err kb_hosts_load(const char *path, struct kb_hosts *h);
/* The run's ranks are exactly the listed ones, the colocation keeps each
 * daemon on one host, and a coordinator off loopback has --keys. */
enum rt_err kb_hosts_check(const struct kb_hosts *h, const struct rt_job *job);
/* "host 1 (ranks 2, 3)" */
const char *kb_hosts_label(const struct kb_hosts *h, uint32_t host, char *buf, size_t cap);
/* Writes an agent's output file piece into `out_dir` (OR-ed into what is
 * there: see hosts.c). */
enum rt_err kb_hosts_write_part(const char *out_dir, const Kb__FilePart *part);
/* Is `addr` ("tcp://HOST:PORT") on loopback? */
bool kb_hosts_loopback(const char *addr);

#endif
