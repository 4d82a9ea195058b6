/* release.c — see release.h. */
#include "release.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "version.h" /* generated: KB_BUILD_COMMIT from `git describe` */

/* The release; KB_BUILD_COMMIT says which commit it was built from. */
#define KB_RELEASE "0.1.0"

const char *kb_version(void)
{
	return "kernbench " KB_RELEASE " (" KB_BUILD_COMMIT ")";
}

/* A plot script: installed beside the binary's share/ folder, or in the
 * source tree the binary was built in (build/bin, build/san/bin). */
bool kb_find_script(const char *name, char *path, size_t cap)
{
	static const char *const rel[] = {
		"../share/kernbench",
		"../../deploy/plot",
		"../../../deploy/plot",
	};
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (n <= 0)
		return false;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return false;
	*slash = '\0';
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		snprintf(path, cap, "%s/%s/%s", exe, rel[i], name);
		if (!access(path, R_OK))
			return true;
	}
	return false;
}
