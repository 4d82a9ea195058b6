/* tidy.h — removing what kernbench left, and only that: one set of rules
 * for the output folder, the launcher's socket folders and the agents'
 * staging folders (never following a link, never touching what another
 * user owns). */
#ifndef KB_TIDY_H
#define KB_TIDY_H

#include <stdbool.h>

/* Removes `name` in folder `at` only if it is ours: a regular file or a
 * socket owned by this user, or (with `dirs`) a real folder of this user
 * whose entries go by the same rule, emptied and then removed. A link is
 * never followed: `name` itself is left alone if it is one, a link inside
 * a folder being removed is removed (the link, not what it points at);
 * anything else is left alone. */
void kb_remove_owned(int at, const char *name, bool dirs);

/* Removes, by kb_remove_owned, each real folder of ours in /tmp named
 * PREFIX<pid>-XXXXXX whose process is gone (SIGKILLed before it could
 * clean up): the next launcher or agent on the host removes what the
 * dead one left. */
void kb_sweep_dead_tmp(const char *prefix);

/* Removes folder `path` and what is in it (two levels deep: a staging
 * folder and its .parts) with async-signal-safe calls only, by the rules
 * of kb_remove_owned: for a process that is dying of a signal. Emptied
 * again (a few rounds) while files still appear in it: the process's
 * other threads run on until it dies. */
void kb_remove_tree_now(const char *path);

#endif
