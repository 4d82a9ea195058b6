/* diff.h — `kernbench diff A B`: what differs between two result folders.
 *
 * From each folder's summary.json: what ran (workload, mode, seed, the
 * kernel arguments, the models and every configuration key), every
 * statistic of the deterministic part (the top-level figures, energy,
 * totals, by_kind and each component's instances) with its absolute and
 * relative delta, and the delivery digest; then each .npy tensor of
 * either folder, byte for byte and, where both have it with the same
 * shape, the largest absolute and relative element error. How a run went
 * (transport, colocation, windows, wall time) is not a difference.
 * Exit 0: the same; 1: they differ; 2: a usage error (a folder without a
 * summary.json, bad options). `--json` prints the same as one JSON object
 * (the Python package reads it). ADR 0047. */
#ifndef KB_DIFF_H
#define KB_DIFF_H

#include <stdbool.h>

/* Compares result folders (or their summary.json) a and b and prints
 * what differs (json: as one JSON object; all: the equal ones too); the
 * exit status. Its command line is cli.c's (kb_cli_diff). */
int kb_diff(const char *a, const char *b, bool json, bool all);

#endif
