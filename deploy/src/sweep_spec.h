/* sweep_spec.h — what a sweep varies: axes of values, from the command
 * line or a YAML sweep file, and the points they make.
 *
 * An axis is one run option and its values: `--set KEY=LIST`,
 * `--arg NAME=LIST`, `--machine LIST`, `--pes LIST`, `--ranks LIST`,
 * `--seed LIST` or `--mode LIST`. A LIST is comma-separated items (`\,`
 * is a comma inside a value); an item is a value, or a range of unsigned
 * integers `LO:HI:STEP` (LO, LO+STEP, ... up to HI) or `LO:HI:xF` (LO,
 * LO*F, ... up to HI). The points are the grid of all axes (the first axis
 * varies slowest) or, zipped, the i-th value of every axis (all of the
 * same length). An axis with one value is not an axis: it is the same for
 * every point.
 *
 * The parsers read the user's bytes and are fuzzed (tests/fuzz). */
#ifndef KB_SWEEP_SPEC_H
#define KB_SWEEP_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rt/err.h"

/* Most values one LIST may expand to, and most points of a sweep. */
#define KB_SWEEP_MAX_VALUES 4096
#define KB_SWEEP_MAX_POINTS 100000
#define KB_SWEEP_MAX_AXES 16
#define KB_SWEEP_MAX_FIXED 128

/* The run option an axis sets. */
enum kb_axis_kind {
	KB_AXIS_SET, KB_AXIS_ARG, KB_AXIS_MACHINE, KB_AXIS_PES, KB_AXIS_RANKS, KB_AXIS_SEED,
	KB_AXIS_MODE
};

struct kb_axis {
	enum kb_axis_kind kind;
	char name[128];   /* config key (set) or argument name (arg); else "" */
	char column[160]; /* its results.csv column: the key, the argument, "machine", ... */
	char **values;    /* owned */
	size_t n;
	bool numeric;     /* every value is an unsigned integer */
	bool geometric;   /* given as a x-range: plot on a log axis */
};

struct kb_sweep_spec {
	char workload[1024];     /* "" until given */
	struct kb_axis axes[KB_SWEEP_MAX_AXES];
	size_t n_axes;
	bool zip;
	char *fixed[KB_SWEEP_MAX_FIXED]; /* other run options, in order (owned) */
	size_t n_fixed;
	char objectives[2][128]; /* results.csv columns to plot ("": the default) */
	unsigned n_objectives;
};

void kb_sweep_spec_init(struct kb_sweep_spec *s);
void kb_sweep_spec_release(struct kb_sweep_spec *s);

/* Expands LIST into values (caller frees each and the array);
 * RT_EUSAGE with one line naming `what` and the item otherwise. */
enum rt_err kb_sweep_values(const char *list, const char *what, char ***values, size_t *n,
			    bool *geometric);
/* Adds an axis (or, with one value, a fixed option) of `kind` from the
 * option's text: "KEY=LIST" for set and arg, "LIST" otherwise. */
enum rt_err kb_sweep_add_axis(struct kb_sweep_spec *s, enum kb_axis_kind kind,
			      const char *text);
/* Adds a run option passed unchanged to every point ("--config", "F"). */
enum rt_err kb_sweep_add_fixed(struct kb_sweep_spec *s, const char *opt, const char *value);
/* Reads a YAML sweep file (docs/exploring.md):
 *
 *   workload: gqa_decode_opt2
 *   set: {dma.bytes_per_cycle: [32, 64, 128]}   # or "32:128:x2"
 *   arg: {seq_kv: "1024:8192:x2"}
 *   machine: [a, b]          # pes, ranks, seed, mode the same way
 *   zip: false
 *   options: [--mode, data]  # other run options
 *   objectives: [latency_ps, energy.total_fj]
 *
 * over `s` (command-line axes come after). RT_EUSAGE naming the file, key
 * and line on anything else. */
enum rt_err kb_sweep_file_parse(struct kb_sweep_spec *s, const char *text, size_t len,
				const char *origin);
/* Number of points, after checking the axes agree (zip: equal lengths)
 * and the count is at most KB_SWEEP_MAX_POINTS. */
enum rt_err kb_sweep_count(const struct kb_sweep_spec *s, size_t *points);
/* The value index of each axis at point `p` (grid: first axis slowest). */
void kb_sweep_point(const struct kb_sweep_spec *s, size_t p, size_t *index);
/* The run option of `kind` ("--set", "--arg", "--machine", ...). */
const char *kb_axis_option(enum kb_axis_kind kind);

#endif
