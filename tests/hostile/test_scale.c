/* test_scale.c — machine sizes the configuration accepts must not cost
 * memory (or buffers) that grow with the square of the machine. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rt/job.h"
#include "rt/topology.h"
#include "workloads.h"

/* Virtual size of this process in bytes: a dense n x n table shows here
 * even before its pages are touched (and under the sanitizers too). */
static uint64_t vm_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long long pages = 0;

	cr_assert(f);
	cr_assert_eq(fscanf(f, "%llu", &pages), 1);
	fclose(f);
	return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* 64 x 64 PEs is 20 480 components: a dense latency table is 3.4 GB. */
Test(hostile_scale, topology_of_64x64_pes_is_a_link_list_not_a_matrix, .timeout = 60)
{
	static struct rt_job job;
	struct rt_topology topo;
	uint64_t before, grown;

	memset(&job, 0, sizeof(job));
	rt_config_defaults(&job.config);
	job.config.ranks = 64;
	job.config.pes = 64;
	snprintf(job.workload, sizeof(job.workload), "gemm");
	rt_topology_init(&topo);
	before = vm_bytes();
	cr_assert_eq(kb_pe_build(&job, &topo), RT_EOK, "%s", rt_last_error());
	cr_assert_eq(rt_topology_place(&topo, RT_COLOCATE_NONE, NULL), RT_EOK, "%s", rt_last_error());
	grown = vm_bytes() - before;
	cr_log_info("64x64 PE topology: %u components, %zu links, %llu KiB of address space",
		    topo.n_components, topo.n_links, (unsigned long long)(grown >> 10));
	/* five per PE, plus per rank its shared ring link and its memory
	 * (2 x 64 DMA channels x 64 B/cycle outrun the default HBM) */
	cr_expect_eq(topo.n_components, 64u * 64u * 5u + 2u * 64u);
	cr_expect_lt(grown, 256ull << 20, "the topology took %llu MiB of address space",
		     (unsigned long long)(grown >> 20));
	/* links still answer: a PE's host reaches its scheduler, not another PE's */
	cr_expect_gt(rt_topology_latency(&topo, 0, 1) + rt_topology_latency(&topo, 1, 0), 0);
	cr_expect_eq(rt_topology_latency(&topo, 0, topo.n_components - 1), 0);
	rt_topology_release(&topo);
}
