/* opts.h — one command-line parser for every `kernbench` command.
 *
 * A command's options are a const table of rows; each row is the option's
 * long name, what its value is called (NULL: a flag), its --help line and
 * the function that takes it. The parser and the help text are made from
 * the table, so adding an option is adding one row (and its function):
 *
 *     { "machine", "NAME", "chip preset (kernbench list --machines)", opt_machine },
 *
 * Conventions, the same for every command: options and positional
 * arguments in any order; --name VALUE or --name=VALUE; a unique prefix
 * of a long name is that option, an ambiguous one is an error listing the
 * candidates, an unknown one an error with the closest name; -h or --help
 * anywhere prints the command's help (exit 0); `--` ends the options.
 * Every error is one line and exit 2. */
#ifndef KB_OPTS_H
#define KB_OPTS_H

#include <stdbool.h>
#include <stdio.h>

#include "rt/err.h"

struct kb_cli; /* what the options fill in (cli.c) */

struct kb_opt {
	const char *name;    /* "out" for --out */
	const char *metavar; /* "DIR"; NULL: a flag, which takes no value */
	const char *help;    /* its --help text; '\n' starts an indented line */
	enum rt_err (*take)(struct kb_cli *cli, const char *value); /* value NULL: a flag */
};

struct kb_command {
	const char *name;     /* "run" */
	const char *usage;    /* "run WORKLOAD [options]" */
	const char *about;    /* lines printed before the options */
	const char *epilogue; /* lines printed after them (NULL: none) */
	const struct kb_opt *opts;
	unsigned n_opts;
	unsigned min_args, max_args; /* positional arguments allowed */
};

/* What parsing found: ERROR is the command line's (exit 2), FAILED the
 * parser's own failure (out of memory: exit 1). */
enum kb_parsed { KB_PARSED_OK, KB_PARSED_HELP, KB_PARSED_ERROR, KB_PARSED_FAILED };

/* An error found while reading the command line and what it names (option
 * values, --config and --set, a program, keys or hosts file) is the user's
 * to fix: RT_EUSAGE, the line unchanged. What no command line causes (out
 * of memory, a plug-in that crashed loading, a stop signal, a transport or
 * protocol failure) keeps its code and exits 1 (ADR 0068). */
enum rt_err kb_opts_usage(enum rt_err err);

/* Parses argv[1..argc) (argv[0] is the command's name) against `cmd`:
 * each option's `take` is called in order, positional arguments are put
 * into args[] (*n_args of them, at most cmd->max_args). KB_PARSED_ERROR
 * with rt_last_error() set to the one line. */
enum kb_parsed kb_opts_parse(const struct kb_command *cmd, int argc, char **argv,
			     struct kb_cli *cli, const char **args, unsigned *n_args);
/* The command's help, made from its table. */
void kb_opts_help(const struct kb_command *cmd, FILE *out);

/* For a command that parses with getopt_long over a table it assembles
 * (the sweep: its own options and every run option), the same rules:
 * whether -h/--help is anywhere before `--`, and, for the argument getopt
 * refused ('?'), the one line opts.c would give — ambiguous (the
 * candidates), unknown (the closest name), a value missing or given to a
 * flag. Returns RT_EINVAL with rt_last_error() set. */
struct option;
bool kb_opts_wants_help(int argc, char **argv);
enum rt_err kb_opts_getopt_refused(const char *command, const struct option *table,
				   const char *arg);

#endif
