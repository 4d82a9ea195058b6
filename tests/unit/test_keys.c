/* test_keys.c — which key files --keys accepts (issue 20 item 5): the
 * owner's alone (0600, 0400) as before, and group-readable ones (0640,
 * 0440: a Kubernetes Secret mounted with fsGroup) only when owned by root
 * or this user in a folder others cannot write. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt/keys.h"

static char dir[64], path[128];

static void make_keys(void)
{
	struct rt_keys k;

	if (rt_keys_check_curve())
		cr_skip_test("libzmq without CURVE");
	snprintf(dir, sizeof(dir), "/tmp/kb-keys-test-XXXXXX");
	cr_assert(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/run.keys", dir);
	cr_assert_eq(rt_keys_generate(&k), RT_EOK);
	cr_assert_eq(rt_keys_write(&k, path), RT_EOK);
}

static void remove_keys(void)
{
	unlink(path);
	rmdir(dir);
}

static bool loads(mode_t mode)
{
	struct rt_keys k;

	cr_assert_eq(chmod(path, mode), 0);
	return rt_keys_load(path, &k) == RT_EOK;
}

Test(keys, group_readable_files_need_a_trusted_owner_and_folder, .timeout = 10,
     .init = make_keys, .fini = remove_keys)
{
	cr_expect(loads(0600));
	cr_expect(loads(0400));
	cr_expect(loads(0440), "a Secret with fsGroup (0440, ours) is refused: %s", rt_last_error());
	cr_expect(loads(0640));
	cr_expect(!loads(0444), "a world-readable key file is accepted");
	cr_expect(strstr(rt_last_error(), "--keys"), "%s", rt_last_error());
	cr_expect(!loads(0460), "a group-writable key file is accepted");
	cr_expect(!loads(0604), "a world-readable key file is accepted");
	/* a folder others may write: anyone could have put the file there */
	cr_assert_eq(chmod(dir, 0777), 0);
	cr_expect(!loads(0440), "a group-readable key file in a world-writable folder is accepted");
	cr_expect(loads(0400), "an owner-only key file is refused for its folder");
	cr_assert_eq(chmod(dir, 0700), 0);
	/* owned by someone else (as root: give it to nobody) */
	if (geteuid() == 0 && chown(path, 65534, 65534) == 0) {
		cr_expect(!loads(0440), "a group-readable key file of another user is accepted");
		cr_expect(loads(0400));
	}
}
