/* hostkeys.c — ephemeral keys of a run across hosts (hostkeys.h, ADR 0036). */
#include "hostkeys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rt/clock.h"
#include "rt/job.h"

#define KEYS_DIR "/tmp/kernbench-%u"

/* The port of "tcp://HOST:PORT" (0: none). */
static unsigned addr_port(const char *addr)
{
	const char *colon = strrchr(addr, ':');
	uint64_t port = 0;

	if (!colon || rt_parse_u64(colon + 1, 1, 65535, &port) != RT_PARSE_OK)
		return 0;
	return (unsigned)port;
}

enum rt_err kb_hostkeys_path(const char *addr, char *path, size_t cap)
{
	unsigned port = addr_port(addr);

	if (!port)
		return rt_fail(RT_EINVAL, "coordinator %.200s: expected tcp://ADDRESS:PORT", addr);
	snprintf(path, cap, KEYS_DIR "/coordinator-%u.keys", (unsigned)geteuid(), port);
	return RT_EOK;
}

/* The user's key folder, which must be a real folder of this user that no
 * one else may enter (created if missing and `create`). */
static enum rt_err private_dir(bool create)
{
	char dir[64];
	struct stat st;
	int fd;

	snprintf(dir, sizeof(dir), KEYS_DIR, (unsigned)geteuid());
	if (create && mkdir(dir, 0700) && errno != EEXIST)
		return rt_fail(RT_EIO, "cannot create %s: %s", dir, strerror(errno));
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return rt_fail(errno == ENOENT ? RT_ENOTFOUND : RT_EIO, "%s: %s", dir, strerror(errno));
	if (fstat(fd, &st) || st.st_uid != geteuid() || (st.st_mode & 077)) {
		close(fd);
		return rt_fail(RT_EIO, "%s is not a private folder of this user (owner %u, mode %03o): "
			       "remove it, or give the run and its agents --keys FILE", dir,
			       (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
	}
	close(fd);
	return RT_EOK;
}

enum rt_err kb_hostkeys_publish_at(const struct rt_keys *k, const char *path)
{
	char tmp[RT_PATH_MAX + 160];
	struct rt_keys client;
	enum rt_err err;

	rt_keys_client_side(k, &client);
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
	unlink(tmp);
	err = rt_keys_write(&client, tmp);
	memset(&client, 0, sizeof(client));
	/* a rename replaces a dead run's file in one step: an agent reads the
	 * old file or the new one, never half of one */
	if (!err && rename(tmp, path)) {
		err = rt_fail(RT_EIO, "cannot write %s: %s", path, strerror(errno));
		unlink(tmp);
	}
	return err;
}

enum rt_err kb_hostkeys_publish(const struct rt_keys *k, const char *addr)
{
	char path[96];
	enum rt_err err = kb_hostkeys_path(addr, path, sizeof(path));

	if (!err)
		err = private_dir(true);
	return err ? err : kb_hostkeys_publish_at(k, path);
}

void kb_hostkeys_withdraw(const char *addr)
{
	char path[96];

	if (!kb_hostkeys_path(addr, path, sizeof(path)) && !private_dir(false))
		unlink(path);
}

/* Reads the file once: RT_ENOTFOUND while there is none yet. */
static enum rt_err read_keys(const char *path, struct rt_keys *k, struct kb_hostkeys_id *id)
{
	enum rt_err err = private_dir(false);
	struct stat st;

	if (err)
		return err;
	if (lstat(path, &st))
		return errno == ENOENT ? RT_ENOTFOUND
				       : rt_fail(RT_EIO, "%s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
		return rt_fail(RT_EIO, "%s is not a key file of this user", path);
	err = rt_keys_load(path, k);
	if (!err && id)
		*id = (struct kb_hostkeys_id){ st.st_dev, st.st_ino, st.st_ctim };
	return err;
}

enum rt_err kb_hostkeys_find(const char *addr, uint64_t wait_ms, struct rt_keys *k,
			     struct kb_hostkeys_id *id)
{
	char path[96];
	uint64_t until = rt_mono_ms() + wait_ms;
	enum rt_err err = kb_hostkeys_path(addr, path, sizeof(path));

	if (err)
		return err;
	while ((err = read_keys(path, k, id)) == RT_ENOTFOUND && rt_mono_ms() < until) {
		const struct timespec nap = { 0, 100 * 1000000L };

		nanosleep(&nap, NULL);
	}
	if (err == RT_ENOTFOUND)
		return rt_fail(RT_ENOTFOUND, "no keys for the coordinator at %s within %llu s: a "
			       "coordinator without --keys leaves them in %s for agents of its own user "
			       "on its own machine; elsewhere give the run and every agent --keys FILE",
			       addr, (unsigned long long)(wait_ms / 1000), path);
	return err;
}

bool kb_hostkeys_changed(const char *addr, const struct kb_hostkeys_id *id)
{
	char path[96];
	struct stat st;

	if (kb_hostkeys_path(addr, path, sizeof(path)) || lstat(path, &st))
		return false;
	return st.st_dev != id->dev || st.st_ino != id->ino ||
	       st.st_ctim.tv_sec != id->ctime.tv_sec || st.st_ctim.tv_nsec != id->ctime.tv_nsec;
}
