/* hosts.c — reads and checks the hosts file (hosts.h).
 *
 * libyaml's event parser, not a schema: the file is three keys deep and
 * every error should name its line. */
#include "hosts.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "rt/buf.h"
#include "rt/infile.h"
#include "rt/yamlcheck.h"
#include "rt/wire.h"

/* One parse: the libyaml parser and where errors point. */
struct hosts_parse {
	yaml_parser_t parser;
	yaml_event_t ev;
	bool have_ev;
	const char *where;
	struct kb_hosts *h;
	uint8_t listed[KB_HOSTS_MAX_RANKS];
};

static enum rt_err bad(struct hosts_parse *p, const char *what)
{
	unsigned line = p->have_ev ? (unsigned)p->ev.start_mark.line + 1
				   : (unsigned)p->parser.problem_mark.line + 1;

	return rt_fail(RT_ECONFIG, "hosts file %s line %u: %s", p->where, line, what);
}

/* The next event into p->ev (the previous one freed). */
static enum rt_err next(struct hosts_parse *p)
{
	if (p->have_ev)
		yaml_event_delete(&p->ev);
	p->have_ev = false;
	if (!yaml_parser_parse(&p->parser, &p->ev)) {
		char what[200];

		snprintf(what, sizeof(what), "not YAML: %s",
			 p->parser.problem ? p->parser.problem : "parse error");
		return bad(p, what);
	}
	p->have_ev = true;
	return RT_EOK;
}

static enum rt_err expect(struct hosts_parse *p, yaml_event_type_t type, const char *what)
{
	enum rt_err err = next(p);

	return err ? err : p->ev.type == type ? RT_EOK : bad(p, what);
}

static const char *scalar(const struct hosts_parse *p)
{
	return (const char *)p->ev.data.scalar.value;
}

/* ranks: [0, 1] (or a block list) for host `host`. */
static enum rt_err parse_ranks(struct hosts_parse *p, uint32_t host)
{
	uint32_t count = 0;
	enum rt_err err = expect(p, YAML_SEQUENCE_START_EVENT, "ranks must be a list, e.g. [0, 1]");

	while (!err && !(err = next(p)) && p->ev.type != YAML_SEQUENCE_END_EVENT) {
		uint64_t r;
		char what[160];

		if (p->ev.type != YAML_SCALAR_EVENT)
			return bad(p, "a rank must be a number");
		if (rt_parse_u64(scalar(p), 0, KB_HOSTS_MAX_RANKS - 1, &r) != RT_PARSE_OK) {
			snprintf(what, sizeof(what), "rank '%.40s' is not a number in [0, %d]", scalar(p),
				 KB_HOSTS_MAX_RANKS - 1);
			return bad(p, what);
		}
		if (p->listed[r]) {
			snprintf(what, sizeof(what), "rank %llu is listed twice (hosts %u and %u)",
				 (unsigned long long)r, p->h->host_of_rank[r], host);
			return bad(p, what);
		}
		p->listed[r] = 1;
		p->h->host_of_rank[r] = host;
		if (r + 1 > p->h->n_ranks)
			p->h->n_ranks = (uint32_t)r + 1;
		count++;
	}
	if (!err && !count)
		return bad(p, "a host with no ranks");
	return err;
}

/* - ranks: [...] */
static enum rt_err parse_host(struct hosts_parse *p, uint32_t host)
{
	bool ranks = false;
	enum rt_err err = RT_EOK;

	if (p->ev.type != YAML_MAPPING_START_EVENT)
		return bad(p, "each host must be a mapping with `ranks: [...]`");
	while (!err && !(err = next(p)) && p->ev.type != YAML_MAPPING_END_EVENT) {
		if (p->ev.type != YAML_SCALAR_EVENT || strcmp(scalar(p), "ranks") || ranks)
			return bad(p, "a host has one key, `ranks`");
		ranks = true;
		err = parse_ranks(p, host);
	}
	if (!err && !ranks)
		return bad(p, "a host without `ranks`");
	return err;
}

static enum rt_err parse_hosts(struct hosts_parse *p)
{
	enum rt_err err = expect(p, YAML_SEQUENCE_START_EVENT, "hosts must be a list");

	while (!err && !(err = next(p)) && p->ev.type != YAML_SEQUENCE_END_EVENT) {
		if (p->h->n_hosts == KB_HOSTS_MAX_RANKS)
			return bad(p, "more hosts than ranks can fill (64)");
		err = parse_host(p, p->h->n_hosts++);
	}
	return err;
}

static enum rt_err parse_coordinator(struct hosts_parse *p)
{
	enum rt_err err = expect(p, YAML_SCALAR_EVENT, "coordinator must be tcp://ADDRESS:PORT");
	const char *v = err ? "" : scalar(p);
	const char *colon = strrchr(v, ':');
	uint64_t port;

	if (err)
		return err;
	if (strncmp(v, "tcp://", 6) || !colon || colon <= v + 6 || strlen(v) >= sizeof(p->h->coordinator) ||
	    rt_parse_u64(colon + 1, 1, 65535, &port) != RT_PARSE_OK)
		return bad(p, "coordinator must be tcp://ADDRESS:PORT (a port in 1..65535)");
	/* what the coordinator binds: an IPv4 address or *, not a name (ZeroMQ
	 * binds addresses and interfaces) and not IPv6 (not enabled) */
	{
		char host[64];
		struct in_addr ip;
		size_t n = (size_t)(colon - (v + 6));

		snprintf(host, sizeof(host), "%.*s", (int)(n < sizeof(host) ? n : sizeof(host) - 1),
			 v + 6);
		if (strcmp(host, "*") && (n >= sizeof(host) || inet_pton(AF_INET, host, &ip) != 1))
			return bad(p, "coordinator: ADDRESS is what the coordinator binds, an IPv4 "
				   "address (127.0.0.1, 0.0.0.0, or * for every interface): not a host "
				   "name, not IPv6 (agents may connect to a name)");
	}
	snprintf(p->h->coordinator, sizeof(p->h->coordinator), "%s", v);
	return RT_EOK;
}

static enum rt_err parse_document(struct hosts_parse *p)
{
	bool seen_hosts = false, seen_coord = false;
	enum rt_err err = expect(p, YAML_STREAM_START_EVENT, "not a YAML stream");

	if (!err)
		err = expect(p, YAML_DOCUMENT_START_EVENT, "empty: expected `coordinator:` and `hosts:`");
	if (!err)
		err = expect(p, YAML_MAPPING_START_EVENT, "expected a mapping with `coordinator:` and "
			     "`hosts:`");
	while (!err && !(err = next(p)) && p->ev.type != YAML_MAPPING_END_EVENT) {
		if (p->ev.type == YAML_SCALAR_EVENT && !strcmp(scalar(p), "coordinator") && !seen_coord) {
			seen_coord = true;
			err = parse_coordinator(p);
		} else if (p->ev.type == YAML_SCALAR_EVENT && !strcmp(scalar(p), "hosts") &&
			   !seen_hosts) {
			seen_hosts = true;
			err = parse_hosts(p);
		} else {
			return bad(p, "unknown or repeated key (expected `coordinator:` and `hosts:` once)");
		}
	}
	if (!err && !seen_coord)
		return bad(p, "no `coordinator: tcp://ADDRESS:PORT`");
	if (!err && (!seen_hosts || !p->h->n_hosts))
		return bad(p, "no `hosts:` list");
	if (!err)
		err = expect(p, YAML_DOCUMENT_END_EVENT, "one document only");
	if (!err && !(err = next(p)) && p->ev.type != YAML_STREAM_END_EVENT)
		return bad(p, "one document only");
	return err;
}

enum rt_err kb_hosts_parse(const char *text, size_t len, const char *where, struct kb_hosts *h)
{
	struct hosts_parse p = { .where = where, .h = h };
	uint64_t timeout = h->agent_timeout_s;
	char what[300];
	enum rt_err err;

	memset(h, 0, sizeof(*h));
	h->agent_timeout_s = timeout ? timeout : 60;
	snprintf(what, sizeof(what), "hosts file %s", where);
	err = rt_yaml_check_depth(text, len, RT_YAML_MAX_DEPTH, what);
	if (err)
		return err;
	if (!yaml_parser_initialize(&p.parser))
		return rt_fail(RT_ENOMEM, "hosts file %s: out of memory", where);
	yaml_parser_set_input_string(&p.parser, (const unsigned char *)text, len);
	err = parse_document(&p);
	if (p.have_ev)
		yaml_event_delete(&p.ev);
	yaml_parser_delete(&p.parser);
	for (uint32_t r = 0; !err && r < h->n_ranks; r++)
		if (!p.listed[r])
			err = rt_fail(RT_ECONFIG, "hosts file %s: rank %u is on no host (ranks 0..%u must "
				      "each be listed once)", where, r, h->n_ranks - 1);
	return err;
}

enum rt_err kb_hosts_load(const char *path, struct kb_hosts *h)
{
	struct rt_buf text;
	enum rt_err err;

	/* a regular file of at most 1 MiB, or a pipe: never blocks on a FIFO
	 * no one writes, never reads /dev/zero for ever */
	rt_buf_init(&text);
	err = rt_infile_read(path, "hosts file", 1u << 20, true, &text);
	if (err)
		err = rt_fail(RT_ECONFIG, "%s", rt_last_error());
	else
		err = kb_hosts_parse(text.data ? text.data : "", text.len, path, h);
	rt_buf_release(&text);
	return err;
}

bool kb_hosts_loopback(const char *addr)
{
	const char *host = !strncmp(addr, "tcp://", 6) ? addr + 6 : addr;

	return !strncmp(host, "127.", 4) || !strncmp(host, "localhost:", 10);
}

enum rt_err kb_hosts_check(const struct kb_hosts *h, const struct rt_job *job)
{
	if (h->n_ranks != job->config.ranks)
		return rt_fail(RT_ECONFIG, "the hosts file places ranks 0..%u and the run has %u rank%s "
			       "(--ranks): every rank must be on exactly one host", h->n_ranks - 1,
			       job->config.ranks, job->config.ranks == 1 ? "" : "s");
	if (job->colocate == RT_COLOCATE_ALL && h->n_hosts > 1)
		return rt_fail(RT_ECONFIG, "--colocate all puts every rank in one daemon, which cannot "
			       "span %u hosts (use rank, pe or none)", h->n_hosts);
	if (!kb_hosts_loopback(h->coordinator) && !job->keys.on)
		return rt_fail(RT_ECONFIG, "coordinator %s is not loopback: run `kernbench keygen --out "
			       "FILE` and pass --keys FILE to the run and to every agent",
			       h->coordinator);
	return RT_EOK;
}

const char *kb_hosts_label(const struct kb_hosts *h, uint32_t host, char *buf, size_t cap)
{
	size_t used = (size_t)snprintf(buf, cap, "host %u (rank", host);
	uint32_t shown = 0;

	for (uint32_t r = 0; r < h->n_ranks; r++)
		if (h->host_of_rank[r] == host)
			shown++;
	if (used < cap && shown > 1)
		used += (size_t)snprintf(buf + used, cap - used, "s");
	shown = 0;
	for (uint32_t r = 0; r < h->n_ranks && used < cap; r++)
		if (h->host_of_rank[r] == host)
			used += (size_t)snprintf(buf + used, cap - used, "%s%u", shown++ ? ", " : " ", r);
	if (used < cap)
		snprintf(buf + used, cap - used, ")");
	return buf;
}

/* An agent's output file piece into the coordinator's staging folder.
 * Every host writes the same files the way one host would: parts under
 * their component's id (one host each), and shared outputs (o.npy) where
 * each program fills its own rows of a file all of them size alike. So a
 * piece is OR-ed into what is there: bytes no host wrote are zero on every
 * host, and the result is the one-host file byte for byte. */
enum rt_err kb_hosts_write_part(const char *out_dir, const Kb__FilePart *part)
{
	char path[RT_PATH_MAX + 256];
	uint8_t *have = NULL;
	struct stat st;
	ssize_t got;
	int fd;
	enum rt_err err = rt_wire_check_part_path(part->path);

	if (err)
		return err;
	if (part->offset > part->size || part->data.len > part->size - part->offset)
		return rt_fail(RT_EDECODE, "FilePart %s: %zu bytes at %llu past its size %llu",
			       part->path, part->data.len, (unsigned long long)part->offset,
			       (unsigned long long)part->size);
	snprintf(path, sizeof(path), "%s/%s", out_dir, part->path);
	fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return rt_fail(RT_EIO, "cannot write %s: %s", path, strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    ((uint64_t)st.st_size < part->size && ftruncate(fd, (off_t)part->size)))
		err = rt_fail(RT_EIO, "cannot write %s: %s", path, strerror(errno));
	if (!err && part->data.len && !(have = malloc(part->data.len)))
		err = rt_fail(RT_ENOMEM, "no memory for %s", path);
	if (!err && part->data.len) {
		got = pread(fd, have, part->data.len, (off_t)part->offset);
		for (size_t i = 0; i < part->data.len; i++)
			have[i] = (uint8_t)((got > 0 && i < (size_t)got ? have[i] : 0) | part->data.data[i]);
		if (pwrite(fd, have, part->data.len, (off_t)part->offset) != (ssize_t)part->data.len)
			err = rt_fail(RT_EIO, "cannot write %s: %s", path, strerror(errno));
	}
	free(have);
	close(fd);
	return err;
}
