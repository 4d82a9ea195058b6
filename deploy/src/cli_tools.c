/* cli_tools.c — the commands that need no more than their options:
 * config, list, keygen, diff, and the agent's options (cli.h); `run`'s
 * options and the steps they share are cli.c's (cli_private.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_private.h"
#include "diff.h"
#include "hosts.h"
#include "rt/buf.h"
#include "rt/config_doc.h"
#include "rt/keys.h"
#include "workloads.h"

static enum rt_err opt_format(struct kb_cli *c, const char *v)
{
	static const char *const names[] = { "yaml", "json", "markdown" };

	for (int i = 0; i < 3; i++)
		if (!strcmp(v, names[i])) {
			c->format = i;
			return RT_EOK;
		}
	return rt_fail(RT_EINVAL, "--format '%.60s': expected yaml, json or markdown", v);
}

static const struct kb_opt config_opts[] = {
	{ "machine", "NAME", "machine preset (deploy/configs/machines/NAME.yaml, or a\n"
			     "path to such a file); default trn2", kb_cli_opt_machine },
	{ "config", "FILE.yaml", "configuration file (repeatable)", kb_cli_opt_config },
	{ "set", "key=value", "configuration override (repeatable)", kb_cli_opt_set },
	{ "ranks", "R", "machine size: ranks", kb_cli_opt_ranks },
	{ "pes", "P", "machine size: PEs per rank", kb_cli_opt_pes },
	{ "format", "F", "yaml (default; loads back with --config), json, or\n"
			 "markdown (the reference table of every key)", opt_format },
};

static const struct kb_command config_command = {
	.name = "config",
	.usage = "config [options]",
	.about = "Prints the effective configuration (defaults < --machine preset < files <\n"
		 "--set < flags) in a form --config loads back, with the preset's sources as\n"
		 "comments (deploy/configs/machines/NAME.yaml); markdown prints the reference\n"
		 "table of every key.\n",
	.opts = config_opts,
	.n_opts = sizeof(config_opts) / sizeof(config_opts[0]),
};

static const struct kb_command list_command = {
	.name = "list",
	.usage = "list",
	.about = "Lists the built-in workloads and kernels.\n",
};

static enum rt_err opt_keys_out(struct kb_cli *c, const char *v)
{
	c->keys_out = v;
	return RT_EOK;
}

static const struct kb_opt keygen_opts[] = {
	{ "out", "FILE", "where to write the keys (mode 0600; never overwritten)", opt_keys_out },
};

static const struct kb_command keygen_command = {
	.name = "keygen",
	.usage = "keygen --out FILE",
	.about = "Writes a run's CURVE keys (one server and one client key pair); give them to\n"
		 "`kernbench run --keys FILE` and to every `kernbench agent --keys FILE`.\n",
	.opts = keygen_opts,
	.n_opts = sizeof(keygen_opts) / sizeof(keygen_opts[0]),
};

static enum rt_err opt_diff_json(struct kb_cli *c, const char *v)
{
	(void)v;
	c->diff_json = true;
	return RT_EOK;
}

static enum rt_err opt_diff_all(struct kb_cli *c, const char *v)
{
	(void)v;
	c->diff_all = true;
	return RT_EOK;
}

static const struct kb_opt diff_opts[] = {
	{ "json", NULL, "print the comparison as one JSON object", opt_diff_json },
	{ "all", NULL, "list the equal figures too", opt_diff_all },
};

static const struct kb_command diff_command = {
	.name = "diff",
	.usage = "diff [--json] [--all] A B",
	.about = "Compares two result folders (or their summary.json): what ran, every\n"
		 "statistic, the delivery digest and the .npy tensors.\n",
	.epilogue = "Exit status: 0 the same, 1 they differ, 2 usage error.\n",
	.opts = diff_opts,
	.n_opts = sizeof(diff_opts) / sizeof(diff_opts[0]),
	.min_args = 2,
	.max_args = 2,
};

static enum rt_err opt_coordinator(struct kb_cli *c, const char *v)
{
	if (strncmp(v, "tcp://", 6) || strlen(v) >= sizeof(c->agent->coordinator) ||
	    !strrchr(v, ':') || strrchr(v, ':') < v + 6)
		return rt_fail(RT_EINVAL, "--coordinator '%.200s': expected tcp://ADDRESS:PORT", v);
	if (strchr(v + 6, '[') || strchr(v + 6, ':') != strrchr(v + 6, ':'))
		return rt_fail(RT_EINVAL, "--coordinator '%.200s': IPv6 is not supported; give an "
			       "IPv4 address or a host name", v);
	snprintf(c->agent->coordinator, sizeof(c->agent->coordinator), "%s", v);
	return RT_EOK;
}

static enum rt_err opt_index(struct kb_cli *c, const char *v)
{
	uint64_t i;

	if (rt_parse_u64(v, 0, KB_HOSTS_MAX_RANKS, &i) != RT_PARSE_OK)
		return rt_fail(RT_EINVAL, "--index '%.40s': expected a number from 0 to %d", v,
			       KB_HOSTS_MAX_RANKS);
	c->agent->index = (uint32_t)i;
	c->agent->have_index = true;
	return RT_EOK;
}

static enum rt_err opt_agent_keys(struct kb_cli *c, const char *v)
{
	enum rt_err err = rt_keys_check_curve();

	return err ? err : rt_keys_load(v, &c->agent->keys);
}

static enum rt_err opt_agent_wait(struct kb_cli *c, const char *v)
{
	uint64_t s;
	enum rt_err err = kb_cli_number("--agent-wait", v, 1, 86400, &s);

	if (!err)
		c->agent->hello_wait_s = (unsigned)s;
	return err;
}

static const struct kb_opt agent_opts[] = {
	{ "coordinator", "tcp://ADDRESS:PORT", "the run's coordinator (required)", opt_coordinator },
	{ "index", "I", "this host's index (default: OMPI_COMM_WORLD_RANK, PMIX_RANK,\n"
			"SLURM_PROCID or JOB_COMPLETION_INDEX)", opt_index },
	{ "keys", "FILE", "CURVE keys (required for a coordinator off loopback;\n"
			  "without it, the keys a coordinator of this user on this\n"
			  "machine left for its agents)", opt_agent_keys },
	{ "agent-wait", "S", "how long to wait for the coordinator's answer to Hello\n"
			     "(default 60; a coordinator pod may be Pending longer)", opt_agent_wait },
};

static const struct kb_command agent_command = {
	.name = "agent",
	.usage = "agent --coordinator tcp://ADDRESS:PORT [--index I] [--keys FILE] [--agent-wait S]",
	.about = "Runs this host's ranks of a `kernbench run --hosts FILE` (deploy/README.md).\n",
	.opts = agent_opts,
	.n_opts = sizeof(agent_opts) / sizeof(agent_opts[0]),
};

/* ---------------------------------------------------------------- commands */

int kb_cli_config(int argc, char **argv)
{
	static struct rt_config_notes notes;
	struct kb_cli cli = { 0 };
	struct rt_config cfg;
	struct rt_buf b;
	char preset[1024];
	unsigned n;
	int rc = kb_cli_parse_or_exit(&config_command, argc, argv, &cli, NULL, &n);
	enum rt_err err;

	if (rc >= 0)
		return rc;
	err = kb_cli_build_config(&cfg, &cli.m, preset, sizeof(preset));
	if (err) {
		rt_print_error(rt_last_error());
		return rt_exit_status(kb_opts_usage(err));
	}
	rt_buf_init(&b);
	/* a preset's YAML keeps its sources as comments */
	if (cli.format == 0 && preset[0] && rt_config_notes_read(preset, &notes) == RT_EOK) {
		err = rt_config_emit_noted(&cfg, &notes, &b);
		rt_config_notes_release(&notes);
	} else {
		err = cli.format == 2 ? rt_config_doc(&b)
				      : rt_config_emit(&cfg, cli.format ? RT_CONFIG_JSON : RT_CONFIG_YAML,
						       &b);
	}
	/* a plug-in's declared parameters, as comments the YAML loads back with */
	if (!err && cli.format == 0)
		kb_models_describe(&cfg, "# ", &b);
	if (!err)
		fputs(b.data ? b.data : "", stdout);
	rt_buf_release(&b);
	return err ? 1 : 0;
}

int kb_cli_list(int argc, char **argv)
{
	unsigned n;
	int rc = kb_cli_parse_or_exit(&list_command, argc, argv, NULL, NULL, &n);

	if (rc >= 0)
		return rc;
	puts("workloads (kernbench run NAME):");
	kb_workload_list(stdout);
	return 0;
}

int kb_cli_keygen(int argc, char **argv)
{
	struct kb_cli cli = { 0 };
	struct rt_keys k;
	unsigned n;
	int rc = kb_cli_parse_or_exit(&keygen_command, argc, argv, &cli, NULL, &n);
	enum rt_err err;

	if (rc >= 0)
		return rc;
	if (!cli.keys_out) {
		rt_print_error("keygen: --out FILE is required (usage: kernbench keygen --out FILE)");
		return 2;
	}
	err = rt_keys_generate(&k);
	if (!err)
		err = rt_keys_write(&k, cli.keys_out);
	explicit_bzero(&k, sizeof(k));
	if (err) {
		rt_print_error(rt_last_error());
		return 1;
	}
	return 0;
}

int kb_cli_diff(int argc, char **argv)
{
	struct kb_cli cli = { 0 };
	const char *dirs[2];
	unsigned n = 0;
	int rc = kb_cli_parse_or_exit(&diff_command, argc, argv, &cli, dirs, &n);

	return rc >= 0 ? rc : kb_diff(dirs[0], dirs[1], cli.diff_json, cli.diff_all);
}

int kb_cli_parse_agent(int argc, char **argv, struct kb_agent_opts *out)
{
	struct kb_cli cli = { .agent = out };
	unsigned n;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = kb_cli_parse_or_exit(&agent_command, argc, argv, &cli, NULL, &n);
	if (rc >= 0)
		return rc;
	if (!out->coordinator[0]) {
		rt_print_error("agent: --coordinator tcp://ADDRESS:PORT is required (see `kernbench "
			       "agent --help`)");
		return 2;
	}
	return -1;
}
