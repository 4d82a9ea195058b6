/* faults.h — the test build's fault injection outside daemons (ADR 0069).
 *
 * Two hooks, both read only by kernbench-test (-DKB_TEST_BUILD); the
 * release binary has stubs that never fail, so no environment variable can
 * make a release run misbehave (ADR 0013):
 *
 *   KB_FAULT=CODE@POINT   rt_fault_point(POINT) fails with CODE (einval,
 *                         enomem, eio): a named place in the launcher
 *                         fails as a real error there would.
 *   KB_FAULT_ALLOC=N[@WHO] the Nth allocation (1-based) the project makes
 *                         (malloc, calloc, realloc, strdup, strndup, wrapped
 *                         with the linker's --wrap) returns NULL, once.
 *                         WHO: the launcher (absent), `daemon` (every
 *                         daemon process) or a process name (kb-dma).
 *                         N = 0 counts: the process writes
 *                         "kb-faultsim: NAME made K allocations" on stderr
 *                         at exit.
 *
 * Daemons have KB_FAULT of their own (daemon.c: misbehaving daemons). */
#ifndef RT_FAULTS_H
#define RT_FAULTS_H

#include "rt/err.h"

/* RT_EOK, or the error KB_FAULT names for `point` (test build only). */
enum rt_err rt_fault_point(const char *point);

#endif
