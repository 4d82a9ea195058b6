/* release.h — what this binary is (release.c): its version and the files
 * installed beside it. Uses nothing of the launcher. */
#ifndef KB_RELEASE_H
#define KB_RELEASE_H

#include <stdbool.h>
#include <stddef.h>

/* "kernbench RELEASE (COMMIT)". */
const char *kb_version(void);
/* Finds the installed or source-tree copy of script `name` (plot
 * scripts) beside this binary; false if there is none. */
bool kb_find_script(const char *name, char *path, size_t cap);

#endif
