/* cli_private.h — what cli.c (`run`) shares with cli_tools.c (the other
 * commands): what the options fill in, the machine options' handlers,
 * the number parser, the configuration's layers and the parse step.
 * Only these two files include it. */
#ifndef KB_CLI_PRIVATE_H
#define KB_CLI_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "opts.h"
#include "rt/config.h"
#include "rt/err.h"
#include "rt/job.h"

struct kb_agent_opts; /* cli.h */

#define MAX_CONFIGS 16

/* Options that shape the machine are applied after --config and --set. */
struct machine_flags {
	uint32_t ranks;
	uint32_t pes;
	const char *configs[MAX_CONFIGS]; /* loaded in order, each over the last */
	uint32_t n_configs;
	const char *sets[RT_MAX_ARGS];
	uint32_t n_sets;
	const char *hosts;        /* --hosts FILE */
	uint64_t agent_timeout_s; /* --agent-timeout S */
	const char *keys_path;    /* --keys FILE */
	const char *rendezvous;   /* --rendezvous DIR (an SPMD launch, spmd.h) */
	const char *coordinator;  /* --coordinator tcp://ADDR:PORT (the same) */
	const char *machine;      /* --machine NAME (the last one given) */
};

/* What the options of any command fill in. */
struct kb_cli {
	struct rt_job *job;        /* run */
	struct machine_flags m;    /* run, config */
	int format;                /* config: 0 yaml, 1 json, 2 markdown */
	const char *keys_out;      /* keygen --out */
	bool diff_json, diff_all;  /* diff --json, --all */
	struct kb_agent_opts *agent;
};

/* RT_EINVAL with one line naming `opt` unless `text` is a number in
 * [min, max]. */
enum rt_err kb_cli_number(const char *opt, const char *text, uint64_t min, uint64_t max,
			  uint64_t *out);
/* defaults < the preset < each --config in order < each --set <
 * --ranks/--pes, validated; *preset_path (may be NULL) receives the
 * preset's file, "" when none was read. */
enum rt_err kb_cli_build_config(struct rt_config *cfg, const struct machine_flags *m,
				char *preset_path, size_t cap);
/* Parses `cmd`'s options: the status to exit with (0 after --help, the
 * usage status after one line), or -1 to go on. */
int kb_cli_parse_or_exit(const struct kb_command *cmd, int argc, char **argv, struct kb_cli *cli,
			 const char **args, unsigned *n_args);

/* The machine options, taken by `run` and `config` alike. */
enum rt_err kb_cli_opt_machine(struct kb_cli *c, const char *v);
enum rt_err kb_cli_opt_config(struct kb_cli *c, const char *v);
enum rt_err kb_cli_opt_set(struct kb_cli *c, const char *v);
enum rt_err kb_cli_opt_ranks(struct kb_cli *c, const char *v);
enum rt_err kb_cli_opt_pes(struct kb_cli *c, const char *v);

#endif
