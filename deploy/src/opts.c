/* opts.c — see opts.h. */
#include "opts.h"

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "rt/buf.h"
#include "rt/config.h"

/* The row --NAME (given with `len` bytes) means: exact, or a unique
 * prefix. NULL with the line set when none or several do. */
static const struct kb_opt *find_opt(const struct kb_command *cmd, const char *name, size_t len)
{
	const struct kb_opt *hit = NULL;
	struct rt_buf all;
	unsigned n = 0;
	char given[128];

	snprintf(given, sizeof(given), "%.*s", (int)(len < 100 ? len : 100), name);
	for (unsigned i = 0; i < cmd->n_opts; i++)
		if (strlen(cmd->opts[i].name) == len && !strncmp(cmd->opts[i].name, name, len))
			return &cmd->opts[i];
	for (unsigned i = 0; i < cmd->n_opts; i++)
		if (!strncmp(cmd->opts[i].name, name, len)) {
			hit = &cmd->opts[i];
			n++;
		}
	if (n == 1 && len)
		return hit;
	if (n > 1 && len) {
		rt_buf_init(&all);
		for (unsigned i = 0; i < cmd->n_opts; i++)
			if (!strncmp(cmd->opts[i].name, name, len))
				rt_buf_printf(&all, "%s--%s", all.len ? ", " : "", cmd->opts[i].name);
		rt_fail(RT_EINVAL, "%s: option '--%s' is ambiguous: it may be %s", cmd->name, given,
			all.data);
		rt_buf_release(&all);
		return NULL;
	}
	{
		const char *near = rt_nearest_name(given, cmd->opts, cmd->n_opts, sizeof(*cmd->opts),
						   offsetof(struct kb_opt, name));

		rt_fail(RT_EINVAL, "%s: unknown option '--%s'%s%s%s (see `kernbench %s --help`)",
			cmd->name, given, near ? " (did you mean '--" : "", near ? near : "",
			near ? "'?)" : "", cmd->name);
	}
	return NULL;
}

static bool is_help(const char *arg)
{
	return !strcmp(arg, "-h") || !strcmp(arg, "--help");
}

bool kb_opts_wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			return false;
		if (is_help(argv[i]))
			return true;
	}
	return false;
}

/* A getopt table as rows find_opt reads (names and whether they take a
 * value); `take` is never called. */
enum rt_err kb_opts_getopt_refused(const char *command, const struct option *table,
				   const char *arg)
{
	struct kb_command cmd = { .name = command };
	struct kb_opt *rows;
	const struct kb_opt *o;
	const char *eq;
	unsigned n = 0;

	if (!arg || arg[0] != '-' || arg[1] != '-')
		return rt_fail(RT_EINVAL, "%s: unknown option '%.60s' (options are long: --NAME; "
			       "see `kernbench %s --help`)", command, arg ? arg : "", command);
	while (table[n].name)
		n++;
	rows = calloc(n ? n : 1, sizeof(*rows));
	if (!rows)
		return rt_fail(RT_ENOMEM, "%s: out of memory", command);
	for (unsigned i = 0; i < n; i++) {
		rows[i].name = table[i].name;
		rows[i].metavar = table[i].has_arg ? "VALUE" : NULL;
	}
	cmd.opts = rows;
	cmd.n_opts = n;
	eq = strchr(arg + 2, '=');
	o = find_opt(&cmd, arg + 2, eq ? (size_t)(eq - arg - 2) : strlen(arg + 2));
	if (o && !o->metavar && eq)
		rt_fail(RT_EINVAL, "%s: --%s takes no value (got '%.60s')", command, o->name, eq + 1);
	else if (o)
		rt_fail(RT_EINVAL, "%s: --%s needs a value", command, o->name);
	free(rows);
	return RT_EINVAL;
}

enum rt_err kb_opts_usage(enum rt_err err)
{
	switch (err) {
	case RT_EOK:
	case RT_ENOMEM:
	case RT_EPEER:
	case RT_EINTERRUPTED:
	case RT_ETRANSPORT:
	case RT_EPROTOCOL:
	case RT_ETIMEOUT:
		return err;
	default:
		return RT_EUSAGE;
	}
}

enum kb_parsed kb_opts_parse(const struct kb_command *cmd, int argc, char **argv,
			     struct kb_cli *cli, const char **args, unsigned *n_args)
{
	bool options = true;

	*n_args = 0;
	/* help wins wherever it is, even after a bad option */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (is_help(argv[i]))
			return KB_PARSED_HELP;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *eq, *value = NULL;
		const struct kb_opt *o;
		enum rt_err err;

		if (options && !strcmp(a, "--")) {
			options = false;
			continue;
		}
		if (!options || a[0] != '-' || !a[1]) { /* "-" alone is a value */
			if (*n_args == cmd->max_args) {
				rt_fail(RT_EINVAL, "%s: unexpected argument '%.200s'%s%s%s", cmd->name, a,
					*n_args ? " after '" : "", *n_args ? args[*n_args - 1] : "",
					*n_args ? "'" : "");
				return KB_PARSED_ERROR;
			}
			args[(*n_args)++] = a;
			continue;
		}
		if (a[1] != '-') {
			rt_fail(RT_EINVAL, "%s: unknown option '%.60s' (options are long: --NAME; see "
				"`kernbench %s --help`)", cmd->name, a, cmd->name);
			return KB_PARSED_ERROR;
		}
		eq = strchr(a + 2, '=');
		o = find_opt(cmd, a + 2, eq ? (size_t)(eq - a - 2) : strlen(a + 2));
		if (!o)
			return KB_PARSED_ERROR;
		if (!o->metavar && eq) {
			rt_fail(RT_EINVAL, "%s: --%s takes no value (got '%.60s')", cmd->name, o->name,
				eq + 1);
			return KB_PARSED_ERROR;
		}
		if (o->metavar) {
			if (eq) {
				value = eq + 1;
			} else if (i + 1 < argc) {
				value = argv[++i];
			} else {
				rt_fail(RT_EINVAL, "%s: --%s needs a value (%s)", cmd->name, o->name,
					o->metavar);
				return KB_PARSED_ERROR;
			}
		}
		err = o->take(cli, value);
		if (err)
			return kb_opts_usage(err) == RT_EUSAGE ? KB_PARSED_ERROR : KB_PARSED_FAILED;
	}
	if (*n_args < cmd->min_args) {
		rt_fail(RT_EINVAL, "%s: missing argument (usage: kernbench %s)", cmd->name, cmd->usage);
		return KB_PARSED_ERROR;
	}
	return KB_PARSED_OK;
}

#define HELP_COLUMN 27

void kb_opts_help(const struct kb_command *cmd, FILE *out)
{
	fprintf(out, "usage: kernbench %s\n", cmd->usage);
	if (cmd->about)
		fprintf(out, "\n%s", cmd->about);
	if (cmd->n_opts)
		fputc('\n', out);
	for (unsigned i = 0; i < cmd->n_opts; i++) {
		const struct kb_opt *o = &cmd->opts[i];
		char head[64];
		int used = snprintf(head, sizeof(head), "  --%s%s%s", o->name, o->metavar ? " " : "",
				    o->metavar ? o->metavar : "");

		fputs(head, out);
		if (used + 1 > HELP_COLUMN) {
			fputc('\n', out);
			used = 0;
		}
		fprintf(out, "%*s", HELP_COLUMN - used, "");
		for (const char *p = o->help; *p; p++) {
			fputc(*p, out);
			if (*p == '\n')
				fprintf(out, "%*s", HELP_COLUMN, "");
		}
		fputc('\n', out);
	}
	fprintf(out, "  -h, --help%*sthis text\n", HELP_COLUMN - 12, "");
	if (cmd->epilogue)
		fprintf(out, "\n%s", cmd->epilogue);
}
