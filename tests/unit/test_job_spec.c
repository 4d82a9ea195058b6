/* test_job_spec.c — the job as a schema (ADR 0075): a job packed as a
 * JobSpec reads back as the same struct, byte for byte, for a daemon; an
 * agent's has no keys and no descriptors; no packing carries the server
 * secret; and what the launcher could not have written is refused with
 * one line, never believed. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernbench.pb-c.h"
#include "rt/buf.h"
#include "rt/job.h"

#define SERVER_SECRET "S3rv3rS3cr3tS3rv3rS3cr3tS3rv3rS3cr3t0000"

/* A job with every field away from its zero value, as the launcher
 * would fill it (strings zero past their end: cli.c clears the job). */
static struct rt_job *full_job(void)
{
	struct rt_job *job = calloc(1, sizeof(*job));

	cr_assert_not_null(job);
	strcpy(job->workload, "lib.so:my_kernel");
	strcpy(job->out_dir, "/tmp/out/.staging");
	strcpy(job->result_dir, "/tmp/out");
	strcpy(job->inputs_dir, "/tmp/inputs");
	job->transport = RT_TRANSPORT_TCP;
	job->colocate = RT_COLOCATE_RANK;
	job->mode = RT_MODE_DATA;
	job->seed = 0xfedcba9876543210ULL;
	job->n_args = 3;
	for (uint32_t i = 0; i < job->n_args; i++) {
		snprintf(job->args[i].name, sizeof(job->args[i].name), "arg%u", i);
		snprintf(job->args[i].value, sizeof(job->args[i].value), "%u", 1000 + i);
	}
	strcpy(job->program, "steps:\n  - kernel: gemm\n");
	rt_config_defaults(&job->config);
	job->config.ranks = 4;
	job->config.pes = 2;
	job->config.dma_queues = 3;
	job->config.hbm_bytes_per_cycle = 1234;
	strcpy(job->config.gemm_params, "a=1,b=2");
	job->trace_windows = true;
	job->oplog_off = true;
	job->ff_mode = RT_FF_AUTO;
	job->trace.no_flows = true;
	job->trace.format = RT_TRACE_PERFETTO;
	job->trace.from_ps = 5;
	job->trace.to_ps = 500;
	job->trace.ranks = 0x5;
	job->quiet = true;
	job->progress = RT_PROGRESS_PLAIN;
	job->keys.on = true;
	strcpy(job->keys.server_public, "ServerPublicServerPublicServerPublic0000");
	strcpy(job->keys.server_secret, SERVER_SECRET);
	strcpy(job->keys.client_public, "ClientPublicClientPublicClientPublic0000");
	strcpy(job->keys.client_secret, "ClientSecretClientSecretClientSecret0000");
	for (uint32_t r = 0; r < RT_MAX_RANKS; r++)
		job->host_of_rank[r] = (uint8_t)(r % 3);
	for (size_t i = 0; i < RT_MAX_MEMORIES; i++) /* 4 ranks' HBM, 2 PEs' TCM each */
		job->memory_fds[i] = i < 4 ? (int)(10 + i)
				     : i >= 64 && (i - 64) % 64 < 2 && (i - 64) / 64 < 4 ? (int)(100 + i)
										   : -1;
	job->max_frame = 123456789;
	return job;
}

static void pack(const struct rt_job *job, enum rt_job_role role, struct rt_buf *out)
{
	rt_buf_init(out);
	cr_assert_eq(rt_job_encode(job, role, out), RT_EOK, "%s", rt_last_error());
}

Test(job_spec, a_daemon_reads_back_the_launchers_job_byte_for_byte, .timeout = 10)
{
	struct rt_job *job = full_job(), *back = calloc(1, sizeof(*back)), *want;
	struct rt_buf b;

	pack(job, RT_JOB_FOR_DAEMON, &b);
	cr_assert_eq(rt_job_decode((const uint8_t *)b.data, b.len, back), RT_EOK, "%s",
		     rt_last_error());
	want = job;
	memset(want->keys.server_secret, 0, sizeof(want->keys.server_secret));
	cr_expect_eq(memcmp(back, want, sizeof(*back)), 0, "the daemon's job differs");
	cr_expect_str_eq(back->config.gemm_params, "a=1,b=2");
	cr_expect_eq(back->memory_fds[64 + 64 * 3 + 1], 100 + 64 + 64 * 3 + 1);
	cr_expect_eq(back->max_frame, 123456789);
	rt_buf_release(&b);
	free(job);
	free(back);
}

Test(job_spec, an_agents_job_has_no_keys_and_no_descriptors, .timeout = 10)
{
	struct rt_job *job = full_job(), *back = calloc(1, sizeof(*back));
	struct rt_buf b;

	pack(job, RT_JOB_FOR_AGENT, &b);
	cr_assert_eq(rt_job_decode((const uint8_t *)b.data, b.len, back), RT_EOK, "%s",
		     rt_last_error());
	cr_expect_not(back->keys.on);
	cr_expect_str_empty(back->keys.client_secret);
	cr_expect_str_empty(back->keys.server_public);
	for (size_t i = 0; i < RT_MAX_MEMORIES; i++)
		cr_expect_eq(back->memory_fds[i], -1, "memory descriptor %zu travelled", i);
	cr_expect_eq(back->max_frame, job->max_frame);
	cr_expect_str_eq(back->workload, job->workload);
	cr_expect_eq(back->host_of_rank[5], 2);
	cr_expect_eq(memcmp(&back->config, &job->config, sizeof(back->config)), 0);
	cr_expect_not(memmem(b.data, b.len, "ClientSecret", 12), "the client secret travelled");
	rt_buf_release(&b);
	free(job);
	free(back);
}

Test(job_spec, no_role_receives_the_server_secret, .timeout = 10)
{
	struct rt_job *job = full_job();
	enum rt_job_role roles[] = { RT_JOB_FOR_DAEMON, RT_JOB_FOR_AGENT };
	char file[256 * 1024];

	for (size_t i = 0; i < 2; i++) {
		struct rt_buf b;
		ssize_t n;
		int fd;

		pack(job, roles[i], &b);
		cr_expect_not(memmem(b.data, b.len, SERVER_SECRET, strlen(SERVER_SECRET)),
			      "role %zu: the server secret is in the JobSpec", i);
		rt_buf_release(&b);
		cr_assert_eq(rt_job_share(job, roles[i], NULL, &fd), RT_EOK, "%s", rt_last_error());
		n = pread(fd, file, sizeof(file), 0);
		cr_assert_gt(n, 0);
		cr_expect_not(memmem(file, (size_t)n, SERVER_SECRET, strlen(SERVER_SECRET)),
			      "role %zu: the server secret is in the job file", i);
		close(fd);
	}
	free(job);
}

/* Unpacking for an edit: the edits point fields at their own strings, so
 * nothing is freed field by field; every block goes at the end. */
static void *blocks[4096];
static size_t n_blocks;

static void *keep_alloc(void *data, size_t size)
{
	cr_assert_lt(n_blocks, sizeof(blocks) / sizeof(blocks[0]));
	return blocks[n_blocks++] = malloc(size);
}

static void no_free(void *data, void *p) {}

static void free_blocks(void)
{
	while (n_blocks)
		free(blocks[--n_blocks]);
}

/* A JobSpec `edit` changed, packed: what rt_job_decode makes of it. */
static enum rt_err decode_edited(void (*edit)(Kb__JobSpec *))
{
	struct rt_job *job = full_job(), *back = calloc(1, sizeof(*back));
	ProtobufCAllocator keep = { keep_alloc, no_free, NULL };
	struct rt_buf b, e;
	Kb__JobSpec *s;
	enum rt_err err;

	pack(job, RT_JOB_FOR_DAEMON, &b);
	s = kb__job_spec__unpack(&keep, b.len, (const uint8_t *)b.data);
	cr_assert_not_null(s);
	edit(s);
	rt_buf_init(&e);
	cr_assert_eq(rt_buf_reserve(&e, kb__job_spec__get_packed_size(s)), RT_EOK);
	e.len = kb__job_spec__pack(s, (uint8_t *)e.data);
	err = rt_job_decode((const uint8_t *)e.data, e.len, back);
	free_blocks();
	rt_buf_release(&b);
	rt_buf_release(&e);
	free(job);
	free(back);
	return err;
}

static void other_version(Kb__JobSpec *s) { s->version = 1; }
static void long_workload(Kb__JobSpec *s)
{
	static char text[RT_PATH_MAX + 10];

	memset(text, 'w', sizeof(text) - 1);
	s->workload = text;
}
static void unknown_key(Kb__JobSpec *s) { s->config[3]->key = (char *)"dma.warp_factor"; }
static void twice(Kb__JobSpec *s) { s->config[3]->key = s->config[2]->key; }
static void missing(Kb__JobSpec *s) { s->n_config--; }
static void text_for_number(Kb__JobSpec *s)
{
	for (size_t i = 0; i < s->n_config; i++)
		if (!strcmp(s->config[i]->key, "machine.ranks")) {
			s->config[i]->value_case = KB__CONFIG_VALUE__VALUE_TEXT;
			s->config[i]->text = (char *)"4";
		}
}
static void wide_u32(Kb__JobSpec *s)
{
	for (size_t i = 0; i < s->n_config; i++)
		if (!strcmp(s->config[i]->key, "machine.pes"))
			s->config[i]->number = (1ULL << 32) + 2;
}
static void ranks_out_of_range(Kb__JobSpec *s)
{
	for (size_t i = 0; i < s->n_config; i++)
		if (!strcmp(s->config[i]->key, "machine.ranks"))
			s->config[i]->number = 100000;
}
static void bad_transport(Kb__JobSpec *s) { s->transport = 7; }
static void bad_progress(Kb__JobSpec *s) { s->progress = 9; }
static void too_many_fds(Kb__JobSpec *s)
{
	static int32_t fds[RT_MAX_MEMORIES + 1];

	s->files->memory_fds = fds;
	s->files->n_memory_fds = RT_MAX_MEMORIES + 1;
}
static void too_many_hosts(Kb__JobSpec *s)
{
	static uint8_t hosts[RT_MAX_RANKS + 1];

	s->host_of_rank.data = hosts;
	s->host_of_rank.len = sizeof(hosts);
}
static void host_out_of_range(Kb__JobSpec *s) { s->host_of_rank.data[3] = RT_MAX_RANKS; }

Test(job_spec, what_the_launcher_could_not_have_written_is_refused, .timeout = 10)
{
	static const struct {
		void (*edit)(Kb__JobSpec *);
		enum rt_err err;
		const char *says;
	} cases[] = {
		{ other_version, RT_ESCHEMA, "version 1" },
		{ long_workload, RT_EDECODE, "longer than its field" },
		{ unknown_key, RT_EDECODE, "dma.warp_factor" },
		{ twice, RT_EDECODE, "given twice" },
		{ missing, RT_EDECODE, "is missing" },
		{ text_for_number, RT_EDECODE, "machine.ranks" },
		{ wide_u32, RT_EDECODE, "machine.pes is not a 32-bit number" },
		{ ranks_out_of_range, RT_EDECODE, "machine.ranks" },
		{ bad_transport, RT_EDECODE, "out of range" },
		{ bad_progress, RT_EDECODE, "out of range" },
		{ too_many_fds, RT_EDECODE, "descriptors" },
		{ too_many_hosts, RT_EDECODE, "hosts of 65 ranks" },
		{ host_out_of_range, RT_EDECODE, "rank 3 is on host" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum rt_err err = decode_edited(cases[i].edit);

		cr_expect_eq(err, cases[i].err, "case %zu: %d, %s", i, err, rt_last_error());
		cr_expect(strstr(rt_last_error(), cases[i].says), "case %zu says '%s'", i,
			  rt_last_error());
	}
}

Test(job_spec, bytes_that_are_not_a_jobspec_are_refused, .timeout = 10)
{
	static const uint8_t garbage[] = { 0xff, 0xff, 0xff, 0xff, 0x0f, 0x12 };
	struct rt_job *back = calloc(1, sizeof(*back));

	cr_expect_eq(rt_job_decode(garbage, sizeof(garbage), back), RT_EDECODE);
	cr_expect(strstr(rt_last_error(), "JobSpec"), "%s", rt_last_error());
	/* nothing at all: version 0, not this build's */
	cr_expect_eq(rt_job_decode(garbage, 0, back), RT_ESCHEMA);
	free(back);
}
