/* test_topology_share.c — the topology a launcher shares with its daemons
 * through the sealed job file (rt_job_share / rt_job_topology): a daemon
 * maps exactly what the launcher built (components and their ops, links,
 * latencies, placement, lookahead), and a damaged file is refused rather
 * than believed. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rt/component.h"
#include "rt/job.h"
#include "rt/topology.h"

static const struct rt_component_ops ops_a = { .name = "a" };
static const struct rt_component_ops ops_b = { .name = "b" };

/* 3 ranks x 2 PEs of two kinds, every pair of components linked with a
 * latency that depends on the pair; placed per PE. */
static void build(struct rt_topology *t)
{
	uint32_t id;

	rt_topology_init(t);
	for (uint32_t r = 0; r < 3; r++)
		for (uint32_t pe = 0; pe < 2; pe++) {
			char name[RT_NAME_MAX];

			snprintf(name, sizeof(name), "r%u.pe%u.a", r, pe);
			cr_assert_eq(rt_topology_add(t, name, &ops_a, r, pe, &id), RT_EOK);
			snprintf(name, sizeof(name), "r%u.pe%u.b", r, pe);
			cr_assert_eq(rt_topology_add(t, name, &ops_b, r, pe, &id), RT_EOK);
		}
	for (uint32_t s = 0; s < t->n_components; s++)
		for (uint32_t d = 0; d < t->n_components; d++)
			if (s != d && (s + d) % 3)
				cr_assert_eq(rt_topology_link(t, s, d, 100 + s * 17 + d), RT_EOK);
	cr_assert_eq(rt_topology_place(t, RT_COLOCATE_PE, NULL), RT_EOK);
}

static int share(const struct rt_topology *t)
{
	struct rt_job *job = calloc(1, sizeof(*job));
	int fd = -1;

	cr_assert_not_null(job);
	strcpy(job->workload, "test");
	rt_config_defaults(&job->config); /* adopting checks the job (rt_job_check) */
	cr_assert_eq(rt_job_share(job, RT_JOB_FOR_DAEMON, t, &fd), RT_EOK, "%s", rt_last_error());
	free(job);
	return fd;
}

Test(topology_share, daemon_maps_what_the_launcher_built, .timeout = 10)
{
	struct rt_topology t, m;
	struct rt_job *job = calloc(1, sizeof(*job));
	int fd;

	build(&t);
	fd = share(&t);
	cr_assert_eq(rt_job_adopt(fd, job), RT_EOK, "the job still reads back: %s", rt_last_error());
	cr_expect_str_eq(job->workload, "test");
	cr_assert_eq(rt_job_topology(fd, &m), RT_EOK, "%s", rt_last_error());
	cr_assert_eq(m.n_components, t.n_components);
	cr_assert_eq(m.n_daemons, t.n_daemons);
	cr_expect_eq(m.n_links, t.n_links);
	cr_expect_eq(m.lookahead_ps, t.lookahead_ps);
	for (uint32_t i = 0; i < t.n_components; i++) {
		cr_expect_str_eq(m.components[i].name, t.components[i].name);
		cr_expect_eq(m.components[i].ops, t.components[i].ops, "ops of %u", i);
		cr_expect_eq(m.components[i].rank, t.components[i].rank);
		cr_expect_eq(m.components[i].pe, t.components[i].pe);
		cr_expect_eq(m.components[i].daemon, t.components[i].daemon);
	}
	for (uint32_t i = 0; i < t.n_daemons; i++) {
		cr_expect_str_eq(m.daemons[i].label, t.daemons[i].label);
		cr_expect_eq(m.daemons[i].n_hosted, t.daemons[i].n_hosted);
	}
	for (uint32_t s = 0; s < t.n_components; s++)
		for (uint32_t d = 0; d < t.n_components; d++)
			cr_expect_eq(rt_topology_latency(&m, s, d), rt_topology_latency(&t, s, d),
				     "latency %u -> %u", s, d);
	cr_expect_eq(rt_topology_latency(&m, 1, 3), 100 + 17 + 3);
	cr_expect_eq(rt_topology_latency(&m, 1, 5), 0, "(1 + 5) %% 3 == 0: not linked");
	rt_topology_release(&m);
	rt_topology_release(&t);
	close(fd);
	free(job);
}

Test(topology_share, job_without_topology_says_build_it, .timeout = 10)
{
	struct rt_topology m;
	int fd = share(NULL);

	cr_expect_eq(rt_job_topology(fd, &m), RT_ENOTFOUND);
	close(fd);
}

/* Every byte of the header and component table, flipped in turn, is
 * refused (checksum or shape); nothing maps a file it would misread. */
Test(topology_share, damaged_topology_is_refused, .timeout = 30)
{
	struct rt_topology t, m;
	struct rt_job *job = calloc(1, sizeof(*job));
	size_t job_part, len;
	uint8_t *bytes;
	int fd;

	build(&t);
	fd = share(&t);
	len = (size_t)lseek(fd, 0, SEEK_END);
	bytes = malloc(len);
	cr_assert_eq(pread(fd, bytes, len, 0), (ssize_t)len);
	close(fd);
	/* the job frame (magic, JobSpec length, checksum), the JobSpec and
	 * zeros to a multiple of 64 bytes (rt/job.h) */
	memcpy(&job_part, bytes + 8, sizeof(job_part));
	job_part = (24 + job_part + 63) / 64 * 64;
	for (size_t at = job_part; at < job_part + 88 + 64 * t.n_components; at += 7) {
		int bad = memfd_create("kb-test-topo", 0);

		bytes[at] ^= 0x5a;
		cr_assert_eq(write(bad, bytes, len), (ssize_t)len);
		cr_expect_eq(rt_job_topology(bad, &m), RT_EDECODE, "byte %zu flipped was believed",
			     at - job_part);
		bytes[at] ^= 0x5a;
		close(bad);
	}
	/* truncated: the tables are not all there */
	fd = memfd_create("kb-test-topo", 0);
	cr_assert_eq(write(fd, bytes, len - 8), (ssize_t)(len - 8));
	cr_expect_eq(rt_job_topology(fd, &m), RT_EDECODE);
	close(fd);
	free(bytes);
	free(job);
	rt_topology_release(&t);
}
