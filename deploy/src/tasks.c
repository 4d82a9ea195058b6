/* tasks.c — see tasks.h. */
#include "tasks.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Tasks (threads of every process) of real user `uid` now, from /proc. */
static uint64_t user_tasks(uid_t uid)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	uint64_t n = 0;

	while (d && (e = readdir(d))) {
		char path[64], line[256];
		unsigned ruid = ~0u;
		unsigned long threads = 0;
		FILE *f;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%.20s/status", e->d_name);
		f = fopen(path, "r");
		while (f && fgets(line, sizeof(line), f)) {
			sscanf(line, "Uid: %u", &ruid);
			sscanf(line, "Threads: %lu", &threads);
		}
		if (f)
			fclose(f);
		if (ruid == uid)
			n += threads;
	}
	if (d)
		closedir(d);
	return n;
}

/* ulimit -u counts every task of the real user; root is never held to it
 * (the kernel lets the initial user and CAP_SYS_RESOURCE pass). */
static enum rt_err check_nproc(uint64_t needed, uint32_t daemons)
{
	struct rlimit rl;
	uint64_t have;

	if (getuid() == 0 || getrlimit(RLIMIT_NPROC, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return RT_EOK;
	have = user_tasks(getuid());
	if (have + needed <= rl.rlim_cur)
		return RT_EOK;
	if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= have + needed) {
		struct rlimit raised = { have + needed, rl.rlim_max };

		if (!setrlimit(RLIMIT_NPROC, &raised))
			return RT_EOK;
	}
	return rt_fail(RT_ECONFIG, "this run starts about %llu processes and threads (%u daemon%s) "
		       "and ulimit -u allows %llu for this user, who runs %llu already (raise it: "
		       "ulimit -u %llu, or fewer daemons with --colocate pe|rank|all)",
		       (unsigned long long)needed, daemons, daemons == 1 ? "" : "s",
		       (unsigned long long)rl.rlim_cur, (unsigned long long)have,
		       (unsigned long long)(have + needed));
}

/* A number from a one-line cgroup file; "max" is UINT64_MAX. */
static bool read_count(const char *path, uint64_t *out)
{
	char text[64] = "";
	FILE *f = fopen(path, "r");
	bool ok = f && fgets(text, sizeof(text), f);

	if (f)
		fclose(f);
	if (!ok)
		return false;
	*out = !strncmp(text, "max", 3) ? UINT64_MAX : strtoull(text, NULL, 10);
	return true;
}

/* The pids controller's folder of this process (v2 unified or v1 "pids"
 * hierarchy), into `dir`. */
static bool pids_cgroup(char *dir, size_t cap)
{
	FILE *f = fopen("/proc/self/cgroup", "r");
	char line[4096];
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f)) {
		char *path = strchr(line, ':'), *ctl;

		if (!path)
			continue;
		ctl = path + 1;
		path = strchr(ctl, ':');
		if (!path)
			continue;
		*path++ = '\0';
		path[strcspn(path, "\n")] = '\0';
		if (!strcmp(ctl, "pids")) {
			snprintf(dir, cap, "/sys/fs/cgroup/pids%s", path);
			found = true;
		} else if (!ctl[0] && !access("/sys/fs/cgroup/cgroup.controllers", F_OK)) {
			snprintf(dir, cap, "/sys/fs/cgroup%s", path);
			found = true;
		}
	}
	if (f)
		fclose(f);
	return found;
}

/* Every level of the hierarchy has its own pids.max: the tightest wins. */
static enum rt_err check_cgroup(uint64_t needed, uint32_t daemons)
{
	char dir[4096], file[4200];

	if (!pids_cgroup(dir, sizeof(dir)))
		return RT_EOK;
	for (;;) {
		uint64_t max, current;
		char *slash;

		snprintf(file, sizeof(file), "%s/pids.max", dir);
		if (read_count(file, &max) && max != UINT64_MAX) {
			snprintf(file, sizeof(file), "%s/pids.current", dir);
			if (read_count(file, &current) && current + needed > max)
				return rt_fail(RT_ECONFIG, "this run starts about %llu processes and "
					       "threads (%u daemon%s) and the pids cgroup %.300s allows "
					       "%llu more (pids.max %llu, %llu in use): raise pids.max, or "
					       "run fewer daemons with --colocate pe|rank|all",
					       (unsigned long long)needed, daemons, daemons == 1 ? "" : "s",
					       dir, (unsigned long long)(max > current ? max - current : 0),
					       (unsigned long long)max, (unsigned long long)current);
		}
		slash = strrchr(dir, '/');
		if (!slash || slash == dir || !strcmp(dir, "/sys/fs/cgroup") ||
		    !strcmp(dir, "/sys/fs/cgroup/pids"))
			return RT_EOK;
		*slash = '\0';
	}
}

enum rt_err kb_check_tasks(uint64_t needed, uint32_t daemons)
{
	enum rt_err err = check_nproc(needed, daemons);

	return err ? err : check_cgroup(needed, daemons);
}
